import React from 'react';

type ButtonProps = { label: string; disabled?: boolean; onClick: () => void };

export const Button = ({ label, disabled, onClick }: ButtonProps) => (
  <button className="btn" disabled={disabled} onClick={onClick}>
    {label}
  </button>
);

export function IconButton(props: ButtonProps & { icon: string }) {
  useEffect(() => {
    document.title = props.label;
  }, [props.label]);
  return (
    <span className="icon-btn">
      <img src={props.icon} alt="" />
      <Button label={props.label} disabled={props.disabled} onClick={props.onClick} />
    </span>
  );
}
